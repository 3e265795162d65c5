"""One AgentDojo suite's tools as an MCP server (streamable HTTP at /mcp), on the suite's
injected environment, kept in this process between calls.

Loopdesk sees only the suite's tools. The harness's side channel is two plain HTTP routes
beside /mcp, which Loopdesk is never told about: POST /reset (a fresh environment for a
task, with its injections) and GET /state (the environment now and the calls that ran).
Loopdesk's bridge starts a stdio server afresh for every call, so a suite's state could not
live in one; a server at a URL holds it, and every call still takes Loopdesk's MCP path.

`python -m scorecard.server SUITE PORT`"""

from __future__ import annotations

import inspect
import sys
from typing import Annotated, Any

from scorecard.suites import read_only, suite


class SuiteState:
    """The environment the tools act on, and every call made since the last reset."""

    def __init__(self, suite_name: str) -> None:
        from agentdojo.functions_runtime import FunctionsRuntime

        self.suite = suite(suite_name)
        self.runtime = FunctionsRuntime(self.suite.tools)
        self.environment: Any = self.suite.load_and_inject_default_environment({})
        self.calls: list[dict[str, Any]] = []

    def reset(self, user_task_id: str | None, injections: dict[str, str]) -> Any:
        environment = self.suite.load_and_inject_default_environment(injections)
        if user_task_id:
            environment = self.suite.get_user_task_by_id(user_task_id).init_environment(environment)
        self.environment = environment
        self.calls = []
        return environment

    def run(self, name: str, arguments: dict[str, Any]) -> str:
        from agentdojo.agent_pipeline.tool_execution import tool_result_to_str

        self.calls.append({"function": name, "args": arguments})
        result, error = self.runtime.run_function(self.environment, name, arguments)
        if error:
            raise ValueError(error)
        return tool_result_to_str(result)


def _signature(parameters: Any) -> inspect.Signature:
    """The keyword parameters of a suite tool, from its pydantic model (descriptions kept)."""
    fields = []
    for name, field in parameters.model_fields.items():
        default = inspect.Parameter.empty if field.is_required() else field.get_default()
        annotation = Annotated[field.annotation, field]
        kind = inspect.Parameter.KEYWORD_ONLY
        fields.append(inspect.Parameter(name, kind, default=default, annotation=annotation))
    return inspect.Signature(fields, return_annotation=str)


def build_server(state: SuiteState) -> Any:
    from mcp.server import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer(f"agentdojo-{state.suite.name}")
    for function in state.suite.tools:
        tool_fn = _bound(state, function.name)
        tool_fn.__signature__ = _signature(function.parameters)  # type: ignore[attr-defined]
        hints = ToolAnnotations(read_only_hint=read_only(function.name))
        server.add_tool(
            tool_fn, name=function.name, description=function.description, annotations=hints
        )
        # The signature validates the arguments; the schema offered is the suite's own,
        # exactly what AgentDojo gives any model, not one re-derived from the signature.
        registered = server._tool_manager.get_tool(function.name)
        registered.parameters = function.parameters.model_json_schema()
    _side_channel(server, state)
    return server


def _bound(state: SuiteState, name: str) -> Any:
    def tool_fn(**arguments: Any) -> str:
        return state.run(name, arguments)

    tool_fn.__name__ = name
    return tool_fn


def _side_channel(server: Any, state: SuiteState) -> None:
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    @server.custom_route("/reset", methods=["POST"])
    async def reset(request: Request) -> JSONResponse:
        body = await request.json()
        environment = state.reset(body.get("user_task"), body.get("injections") or {})
        return JSONResponse({"environment": environment.model_dump(mode="json")})

    @server.custom_route("/state", methods=["GET"])
    async def current(_request: Request) -> JSONResponse:
        environment = state.environment.model_dump(mode="json")
        return JSONResponse({"environment": environment, "calls": state.calls})


def main() -> None:
    import uvicorn

    suite_name, port = sys.argv[1], int(sys.argv[2])
    server = build_server(SuiteState(suite_name))
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
