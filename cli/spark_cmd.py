"""placeholder"""

import click


@click.group()
def spark() -> None:
    """Not yet."""
