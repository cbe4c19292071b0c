"""The benchmark: its export, its data model (``data``), the Hub and the IR ecosystem's formats."""
