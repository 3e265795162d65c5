"""Agent definitions: one Markdown file per agent in prompts/agents/, with YAML front
matter (name, description, tier, output_schema, an optional label) and the agent's prompt as the body."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from app.config import PROJECT_ROOT

AGENTS_DIR = PROJECT_ROOT / "prompts" / "agents"


@dataclass(frozen=True)
class AgentDefinition:
    slug: str  # the file name: "ad-copy"
    name: str  # shown in the timeline: "Ad copy"
    description: str  # what the host model reads
    prompt: str
    output_schema: dict[str, Any]
    tier: str = "host"  # "host" or "fast": which model writes
    title_field: str = "title"
    max_tokens: int = 4096
    label: str = ""  # a run's step, in plain words: "Wrote a quiz" (default "Wrote <name>")

    @property
    def step_label(self) -> str:
        return self.label or f"Wrote {self.name.lower()}"

    @property
    def tool_name(self) -> str:
        return self.slug.replace("-", "_")


@dataclass
class AgentCatalog:
    agents: dict[str, AgentDefinition] = field(default_factory=dict)

    def __iter__(self) -> Iterator[AgentDefinition]:
        return iter(sorted(self.agents.values(), key=lambda a: a.slug))


def parse_agent_file(path: Path) -> AgentDefinition:
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        raise ValueError(f"{path.name}: agent files start with YAML front matter")
    _, front, body = text.split("---\n", 2)
    meta = yaml.safe_load(front) or {}
    for key in ("name", "description", "output_schema"):
        if key not in meta:
            raise ValueError(f"{path.name}: front matter needs '{key}'")
    Draft202012Validator.check_schema(meta["output_schema"])
    return AgentDefinition(
        slug=path.stem,
        name=meta["name"],
        description=" ".join(str(meta["description"]).split()),
        prompt=body.strip(),
        output_schema=meta["output_schema"],
        tier=meta.get("tier", "host"),
        title_field=meta.get("title_field", "title"),
        max_tokens=int(meta.get("max_tokens", 4096)),
        label=str(meta.get("label") or ""),
    )


def load_agents(directory: Path = AGENTS_DIR) -> AgentCatalog:
    files = sorted(directory.glob("*.md"))
    return AgentCatalog({p.stem: _parse_cached(p, p.stat().st_mtime_ns) for p in files})


@lru_cache(maxsize=128)
def _parse_cached(path: Path, _mtime_ns: int) -> AgentDefinition:
    return parse_agent_file(path)
