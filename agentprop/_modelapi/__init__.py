"""Everything between agentprop and a model API: the one budget, retries and the adaptive
concurrency limiter, and the API cache. Knows nothing of specs or scenarios."""
