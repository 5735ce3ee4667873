"""placeholder"""

import click


@click.group()
def dirs() -> None:
    """Not yet."""
