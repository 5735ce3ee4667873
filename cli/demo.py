"""placeholder"""

import click


@click.group()
def demo() -> None:
    """Not yet."""
