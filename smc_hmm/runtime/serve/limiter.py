"""The serving party's rate limits: a token bucket per key (a source address for
``connect_rate_per_address``, a client certificate name for ``session_rate_per_client``)."""

from __future__ import annotations

__all__ = ["RateLimiter"]


class RateLimiter:
    """A token bucket per key (a source address, a client name): ``rate`` events a second,
    ``burst`` at once.  Buckets that are full again are forgotten once there are many keys."""

    def __init__(self, rate: float, burst: int, max_keys: int = 4096):
        self.rate, self.burst, self.max_keys = float(rate), int(burst), max_keys
        self._buckets: dict[str, tuple[float, float]] = {}

    def allow(self, key: str, now: float) -> bool:
        tokens, last = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        if len(self._buckets) > self.max_keys:
            full = self.burst / self.rate
            self._buckets = {k: b for k, b in self._buckets.items() if now - b[1] < full}
        return allowed
