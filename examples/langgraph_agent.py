"""A LangGraph ReAct agent on ``langchain-openai``'s ``ChatOpenAI`` with bound tools, unmodified::

verigym eval calc --model smollm2-135m-instruct --env-arg verbose=true --agent examples/langgraph_agent.py:agent
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent


async def agent(task: Any, client: Any) -> str:
    """``client`` says where the gateway is; LangChain makes its own client from the URL and key."""
    llm = ChatOpenAI(model="policy", base_url=str(client.base_url), api_key=client.api_key, max_retries=0)
    graph = create_react_agent(llm, [tool(fn) for fn in task.tools.values()])
    result = await graph.ainvoke({"messages": task.messages}, {"recursion_limit": 12})
    return str(result["messages"][-1].content)
