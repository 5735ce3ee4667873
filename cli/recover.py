"""placeholder"""

import click


@click.group()
def recover() -> None:
    """Not yet."""
