"""placeholder"""

import click


@click.group()
def verify() -> None:
    """Not yet."""
