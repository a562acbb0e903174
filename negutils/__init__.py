"""negutils: the thin library behind negbook. Notebooks narrate; everything testable lives here."""
__version__ = "0.1.0"
