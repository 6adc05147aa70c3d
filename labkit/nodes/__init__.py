"""Built-in nodes, one family a module."""

__all__: list[str] = []
