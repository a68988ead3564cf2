"""gold."""
