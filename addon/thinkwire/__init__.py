"""thinkwire: move inline reasoning markup into each LLM API's native reasoning field."""

__version__ = "0.1.0"
