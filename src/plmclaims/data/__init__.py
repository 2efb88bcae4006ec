"""Data loaders, one module per benchmark family."""
