"""The model-client layer: every model call agentprop makes goes through it. Knows nothing of
specs or scenarios.

- :mod:`~agentprop._modelapi.canonical`: the canonical request, the text the cache keys.
- :mod:`~agentprop._modelapi.cache`: the API cache, keyed by the canonical request and the trial
  index (replay-only in CI, with the nearest recorded request and a diff on a miss).
- :mod:`~agentprop._modelapi.retry` and :mod:`~agentprop._modelapi.limiter`: retries (``retry-after``
  honoured) and the adaptive concurrency limit.
- :mod:`~agentprop._modelapi.budget`: the one budget (runs, tokens, dollars), with a reservation
  of each call's worst-case cost before it is sent.
- :mod:`~agentprop._modelapi.context`: the model-call context (budget, cache mode, open caches)
  that the session, or the check running an agent, hands down to model calls.
- :mod:`~agentprop._modelapi.providers` and :mod:`~agentprop._modelapi.client`: the provider
  APIs (Anthropic Messages, OpenAI Chat Completions and Responses) and the client that puts the
  cache, the budget, retries, the limiter, the offline-key rule and secret scrubbing around them.
"""
