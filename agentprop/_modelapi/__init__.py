"""The model-client layer: every model call agentprop makes goes through it.

It knows nothing of specs or scenarios. :mod:`~agentprop._modelapi.client` puts the cache,
the budget, retries, the concurrency limit, the offline-key rule and secret scrubbing around
the provider APIs of :mod:`~agentprop._modelapi.providers`.
"""
