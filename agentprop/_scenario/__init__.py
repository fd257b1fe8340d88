"""Scenarios: a path of the decision tree turned into a conversation, a world and expectations
(:mod:`.build`), the tool fixtures (:mod:`.world`), what an agent did (:mod:`.trace`), and how a
node's exits read a binding (:mod:`.exits`)."""
