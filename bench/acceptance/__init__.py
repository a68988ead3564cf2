"""acceptance."""
