"""placeholder"""

import click


@click.group()
def txn() -> None:
    """Not yet."""
