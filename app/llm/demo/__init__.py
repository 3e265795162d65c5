"""The demo model: a scripted stand-in for the Anthropic Messages API, served in-process
(the engine, `engine.py`, speaks the wire format; the script, `script.py` and
`agent_outputs.py`, decides what it answers)."""

from app.config import DEMO_MODEL_NAME
from app.llm.demo.agent_outputs import agent_output
from app.llm.demo.engine import DEFAULT_DELAY, DemoTransport

__all__ = ["DEFAULT_DELAY", "DEMO_MODEL_NAME", "DemoTransport", "agent_output"]
