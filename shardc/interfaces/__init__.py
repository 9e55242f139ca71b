"""Op interfaces shardc attaches to foreign ops (see `sharding.py`)."""
