"""``actorrt tls-certs``: a CA and a certificate signed by it, for a cluster's mutual TLS."""

from __future__ import annotations

from pathlib import Path

import click


@click.command(name="tls-certs")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory for the CA and the certificates (a CA already there signs them).")
@click.option("--host", "hosts", multiple=True, metavar="NAME_OR_IP",
              help="An address the certificate names; repeat it for every address of the cluster "
                   "(default: this machine's: 127.0.0.1, localhost, its hostname and its addresses).")
@click.option("--per-host", is_flag=True,
              help="A certificate per host (HOST.pem, HOST-key.pem) instead of one for all (cert.pem, key.pem).")
@click.option("--days", default=365, show_default=True, type=click.IntRange(min=1),
              help="How long the certificates are valid.")
def tls_certs(out_dir: Path, hosts: tuple[str, ...], per_host: bool, days: int) -> None:
    """Write a CA (ca.pem, ca-key.pem) and a certificate and key signed by it, for
    `actorrt start --tls-cert ... --tls-key ... --tls-ca ...` or ACTORRT_TLS_CERT, ACTORRT_TLS_KEY
    and ACTORRT_TLS_CA.

    A process's certificate must name every address it serves on (the --host of `actorrt start`,
    the host= of actorrt.init): peers refuse one that does not.
    """
    from actorrt.cluster import certs  # cryptography is loaded for this command only

    names = list(hosts) or certs.local_names()
    for path in certs.make_certs(out_dir, names, per_host, days):
        click.echo(f"wrote {path}")
    click.echo(f"The certificates name {', '.join(names)}. Keep {out_dir / certs.CA_KEY} private: "
               "whoever has it can join the cluster.")
