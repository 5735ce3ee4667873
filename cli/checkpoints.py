"""placeholder"""

import click


@click.group()
def checkpoints() -> None:
    """Not yet."""
