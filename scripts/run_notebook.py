"""Run a notebook headless in its own kernel and print every cell's output as it would show.

    .venv/bin/python scripts/run_notebook.py examples/wordcount.ipynb          # run it, print outputs
    .venv/bin/python scripts/run_notebook.py examples/wordcount.ipynb --save   # and store them in the file

Exits 1 if a cell fails (its error is printed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def output_text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    if output.get("output_type") == "error":
        return "\n".join(output.get("traceback", [])) + "\n"
    data = output.get("data", {})
    return data.get("text/plain", "") + ("\n" if "text/plain" in data else "")


@click.command()
@click.argument("notebook", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--save", is_flag=True, help="Write the outputs into the notebook file.")
@click.option("--timeout", default=600, show_default=True, help="Seconds a cell may take.")
def main(notebook: Path, save: bool, timeout: int) -> None:
    """Run NOTEBOOK and print what each code cell shows."""
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(notebook.parent)}})
    failed = None
    try:
        client.execute()
    except CellExecutionError as exc:
        failed = exc
    for number, cell in enumerate((c for c in nb.cells if c.cell_type == "code"), start=1):
        click.echo(f"--- [{number}] {cell.source.splitlines()[0] if cell.source else ''}")
        click.echo("".join(output_text(o) for o in cell.get("outputs", [])), nl=False)
    if save:
        nbformat.write(nb, notebook)
        click.echo(f"outputs saved in {notebook}")
    if failed is not None:
        click.echo(f"a cell failed: {failed}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
