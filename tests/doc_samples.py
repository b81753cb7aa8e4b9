"""What a docs sample needs to run offline, as a script (``test_readme``) and in a kernel
(``test_docs_kernel``): stand-ins for the network models smolagents samples name, and the runs a
sample left behind, to check that they succeeded."""

from __future__ import annotations

from typing import Any

import nbagent

OFFLINE_ANSWER = "An offline answer."
"""What every offline model answers."""


def offline_smolagents() -> tuple[type, type]:
    """``OfflineSmolModel`` and ``OfflineWebSearch``, made when smolagents is installed."""
    import smolagents
    from smolagents.models import ChatMessage, MessageRole
    from smolagents.monitoring import TokenUsage

    class OfflineSmolModel(smolagents.Model):
        """Stands in for ``InferenceClientModel(...)`` (any arguments): a CodeAgent's model that
        answers every task at once. (A ToolCallingAgent sample would need a final_answer tool call.)"""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(model_id="offline-smolagents")

        def generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> ChatMessage:
            text = f"Thought: I know this.\n<code>\nfinal_answer({OFFLINE_ANSWER!r})\n</code>"
            usage = TokenUsage(input_tokens=20, output_tokens=8)
            return ChatMessage(role=MessageRole.ASSISTANT, content=text, token_usage=usage)

    class OfflineWebSearch(smolagents.Tool):
        """Stands in for ``WebSearchTool()``: the same tool name and inputs, canned results."""

        name = "web_search"
        description = "Searches the web for a query and returns the top results."
        inputs = {"query": {"type": "string", "description": "The search query to perform."}}  # noqa: RUF012
        output_type = "string"

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__()

        def forward(self, query: str) -> str:
            return f"Offline search results for {query!r}."

    return OfflineSmolModel, OfflineWebSearch


def outcomes(namespace: dict[str, Any]) -> dict[str, nbagent.RunRecord]:
    """Every run a sample left in its namespace, by name, waiting for the ones still going."""
    found = {}
    for name, value in namespace.items():
        items = value if isinstance(value, (list, tuple)) else [value]
        for index, item in enumerate(items):
            label = name if items is not value else f"{name}[{index}]"
            if isinstance(item, nbagent.Run):
                found[label] = item.wait(timeout=120)
            elif isinstance(item, nbagent.RunRecord):
                found[label] = item
    return found
