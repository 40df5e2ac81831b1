"""qtier's domain, in four rooms: hardware and sets -> result -> model."""
