"""The contracts that cross Temporal's boundaries: the AgentSession operator contract
(``session``) and what statecore's activities take and return (``activities``).

Pure pydantic models shared by the client, the workflows and the activities; the workflow
sandbox passes them through."""
