"""Model API plumbing a user configures: the on-disk API cache and the dollar budget.

:class:`ApiCache` records model calls so a rerun replays them (:class:`CacheMode`);
:class:`Budget` caps a session's spend, priced by :class:`ModelPrice`.
"""

from agentprop._modelapi.budget import Budget, ModelPrice
from agentprop._modelapi.cache import ApiCache, CacheMode

__all__ = ["ApiCache", "Budget", "CacheMode", "ModelPrice"]
