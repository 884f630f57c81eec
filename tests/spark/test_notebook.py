"""The example notebook, executed headless as a user would run it (its own kernel, cluster, Spark)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).parents[2] / "examples" / "wordcount.ipynb"


def test_the_wordcount_notebook_runs_and_matches_spark(tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()  # raises on a failing cell
    outputs = "".join(o.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                      for o in cell.get("outputs", []))
    assert "killed node 1" in outputs
    assert "equal to Spark's groupBy().count()" in outputs
    assert "words through the streaming dataflow: equal to Spark's groupBy().count()" in outputs


def test_the_committed_notebook_holds_the_outputs_of_a_real_run():
    """A reader on a web viewer sees what it does (scripts/run_notebook.py --save stores them)."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    shown = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                    for cell in code for o in cell.get("outputs", []))
    assert "killed node 1" in shown and "equal to Spark's groupBy().count()" in shown
    assert not [o for cell in code for o in cell.get("outputs", []) if o.get("output_type") == "error"]
