"""Qt desktop interface (PySide6). The pipeline never imports this package."""
