"""One settings object, read from ``BOTTOWN_*`` environment variables and an optional TOML file.

Precedence: keyword arguments, then environment variables, then the TOML file (``bottown.toml`` in
the working directory, or the file named by ``BOTTOWN_CONFIG``), then the defaults below. Every key
is documented in docs/configuration.md. Secrets are ``SecretStr``: they never appear in ``repr``
or logs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from town.features.ratings.moods import Moods
from town.world.gametime import parse_game_time

CONFIG_ENV = "BOTTOWN_CONFIG"
DEFAULT_CONFIG_FILE = "bottown.toml"
REMOVED_KEYS = {"event_loop": "bottown runs on asyncio's own event loop"}


class SettingsError(Exception):
    """The configuration cannot be used; the message says which key and what to do."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="BOTTOWN_", extra="forbid", validate_default=True, frozen=True
    )

    data_dir: Path = Field(Path("data"), description="Folder for the SQLite file and Chroma data.")
    database_url: str | None = Field(
        None, description="SQLAlchemy URL; default sqlite:///<data_dir>/bottown.db."
    )
    chroma_url: str | None = Field(
        None, description="Chroma server URL (http://host:port); default: embedded client."
    )
    chroma_namespace: str = Field(
        "bottown",
        pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_-]{1,40}$",
        description="Prefix of this deployment's Chroma collections.",
    )

    embedder: Literal["minilm", "openai", "hash"] = Field(
        "minilm", description="minilm: bundled all-MiniLM-L6-v2; openai: the embeddings API."
    )
    embedding_precision: Literal["int8", "fp32"] = Field(
        "int8",
        description="minilm's arithmetic: int8 is about twice as fast (cosine 0.99 to fp32); "
        "fp32 reproduces sentence-transformers.",
    )
    embedding_model: str = Field("text-embedding-3-small", description="Model for embedder=openai.")
    embedding_dim: int = Field(384, ge=8, le=8192, description="Vector size for openai/hash.")

    brain: Literal["auto", "offline", "llm"] = Field(
        "auto", description="auto: the LLM when llm_base_url or llm_api_key is set, else offline."
    )
    llm_base_url: str | None = Field(None, description="OpenAI-compatible base URL (…/v1).")
    llm_api_key: SecretStr | None = Field(None, description="API key for the LLM server.")
    llm_model: str = Field("gpt-4o-mini", description="Chat model name.")
    llm_model_b: str | None = Field(
        None, description="A second chat model for a live A/B test (eval live --by model)."
    )
    llm_base_url_b: str | None = Field(
        None, description="The second model's server (default: llm_base_url)."
    )
    ab_split: Literal["resident", "message"] = Field(
        "resident", description="The A/B split: each resident one model, or each message."
    )
    llm_timeout_s: float = Field(60.0, gt=0, description="Seconds before an LLM call times out.")
    llm_max_attempts: int = Field(
        4, ge=1, le=10, description="Tries per call: the openai client retries 429/5xx/timeouts."
    )
    llm_concurrency: int = Field(
        8, ge=1, le=256, description="The most LLM calls in flight at once, whatever the server."
    )
    llm_slots: int | None = Field(
        None,
        ge=1,
        le=256,
        description="Calls the LLM server answers at once, when it does not say (llama.cpp's "
        "/props does): default 1 on this machine or a private network, else llm_concurrency.",
    )
    llm_priority: bool = Field(
        False, description="Send each call's urgency as vLLM's priority (--scheduling-policy)."
    )
    llm_pace: Literal["keep", "wait"] = Field(
        "keep",
        description="keep: when the LLM cannot keep up with the ticks, importance ratings and "
        "then decomposition are answered offline before ticks stretch; wait: always wait.",
    )
    daily_token_budget: int = Field(
        2_000_000, ge=0, description="Tokens per town per day; 0 = no limit. Then: offline brain."
    )

    recency_weight: float = Field(1.0, ge=0, description="Retrieval weight of recency.")
    importance_weight: float = Field(1.0, ge=0, description="Retrieval weight of importance.")
    relevance_weight: float = Field(1.0, ge=0, description="Retrieval weight of relevance.")
    recency_decay: float = Field(0.99, gt=0, le=1, description="Recency factor per game hour.")

    town: str = Field("smallville", description="The town `bottown run` serves.")
    tick_seconds: float = Field(
        10.0, gt=0, le=3600, description="Real seconds between two ticks while a town runs."
    )
    demo_start: str = Field(
        "2023-02-14 09:00",
        description="Game time the served demo (make demo) opens at; the town runs headless "
        "from the scenario's start to it first (the party is at 17:00 that day).",
    )
    demo_tick_seconds: float = Field(
        4.0, gt=0, le=3600, description="Real seconds between two ticks of the served demo."
    )
    demo_run_up: Literal["offline", "model"] = Field(
        "offline",
        description="Who thinks while the demo lives headless up to demo_start: the offline "
        "brain (fast, never waiting on a slow server), or the configured model; from "
        "demo_start on the configured brain thinks.",
    )
    missed_time: Literal["jump", "catch-up"] = Field(
        "jump",
        description="After downtime: jump the clock to now, or catch up at most catch_up_ticks.",
    )
    catch_up_ticks: int = Field(12, ge=0, le=10_000, description="Most ticks run to catch up.")
    daily_call_budget: int = Field(
        0, ge=0, description="LLM calls per town per day; 0 = no limit. Then: offline brain."
    )
    visitor_messages_per_minute: int = Field(
        6, ge=0, description="Messages one visitor may send a minute; 0 = no limit."
    )
    channel_messages_per_minute: int = Field(
        20,
        ge=0,
        description="Town messages posted to one Discord or Slack channel a minute; 0 = no limit.",
    )
    web_messages_per_minute: int = Field(
        30,
        ge=0,
        description="Town messages posted to one place of the web page a minute (what a reader "
        "can follow: the page has no platform limit); 0 = no limit.",
    )
    audit_retention_days: int = Field(
        90, ge=0, description="Days the audit log keeps inputs and outputs; 0 = forever."
    )
    reactions_up: str = Field(
        "👍 ❤️ 😂 ⭐", description="Reactions that rate a resident's message up (space-separated)."
    )
    reactions_down: str = Field(
        "👎 😕 🙄", description="Reactions that rate it down; any other is counted apart."
    )
    worker_name: str | None = Field(
        None, max_length=100, description="This worker's name (default: host name and pid)."
    )
    lease_seconds: float = Field(
        30.0, gt=0, le=3600, description="How long a worker's lease on a town lasts unrenewed."
    )
    admins: list[str] = Field(
        default_factory=list,
        description='Extra admins as "platform:user_id" (e.g. "discord:1234", "web:alice").',
    )
    forget_on_leave: str = Field(
        "ban,kick",
        pattern=r"^\s*((ban|kick|leave)\s*(,\s*(ban|kick|leave)\s*)*|none)?\s*$",
        description="Which departures forget a member: any of ban, kick, leave; or none.",
    )
    blocklist: str = Field(
        "",
        description="Words residents never post, comma-separated, besides the town folder's "
        "blocklist.txt.",
    )
    moderation_url: str | None = Field(
        None,
        description="An OpenAI-compatible /moderations endpoint every resident's line passes.",
    )

    web_host: str = Field("127.0.0.1", description="Address the local web adapter listens on.")
    web_port: int = Field(8765, ge=0, le=65535, description="Port of the web adapter (0: any).")

    discord_token: SecretStr | None = Field(None, description="Discord bot token.")
    discord_guild_id: int | None = Field(
        None, description="Discord server (guild) the town lives in; default: the first joined."
    )
    community_personas: list[str] = Field(
        default_factory=lambda: ["smallville"],
        min_length=1,
        description="Persona folders a Discord server may found its town from "
        "(`/town found [persona]`); the first is the default.",
    )
    founder_role: str = Field(
        "Town Founder",
        max_length=100,
        description="The name of a role whose holders may found a server's town, besides "
        "members with Manage Server (a server makes the role and hands it out; empty: none).",
    )
    forget_removed_after: float = Field(
        30.0,
        ge=0,
        description="Days after the bot is removed from a server before its paused town is "
        "forgotten whole.",
    )
    discord_message_content: bool = Field(
        True,
        description="Ask for the privileged message_content intent (off: mentions and slash "
        "commands only).",
    )

    slack_bot_token: SecretStr | None = Field(None, description="Slack bot token (xoxb-...).")
    slack_app_token: SecretStr | None = Field(
        None, description="Slack app-level token (xapp-...) for Socket Mode."
    )
    slack_signing_secret: SecretStr | None = Field(
        None, description="Slack signing secret, for the HTTP Events API."
    )
    slack_mode: Literal["socket", "http"] = Field(
        "socket", description="socket: Socket Mode (no public URL); http: the Events API."
    )
    slack_api_url: str = Field(
        "https://slack.com/api/",
        description="Slack Web API base URL (a proxy, or a local stand-in for tests).",
    )
    slack_port: int = Field(3000, ge=0, le=65535, description="Port for slack_mode = http.")
    slack_host: str = Field(
        "127.0.0.1", description="Address the HTTP Events API listens on (slack_mode = http)."
    )
    slack_client_id: str | None = Field(
        None,
        description="The Slack app's client id: set, `--platform slack` serves every workspace "
        "that installs the app (OAuth, HTTP mode) instead of one bot token's.",
    )
    slack_client_secret: SecretStr | None = Field(
        None, description="The Slack app's client secret (with slack_client_id)."
    )
    slack_redirect_uri: str | None = Field(
        None,
        description="The OAuth redirect URL as set in the app (https://<host>/slack/oauth_redirect).",
    )
    slack_authorize_url: str = Field(
        "https://slack.com/oauth/v2/authorize",
        description="Slack's install page (a local stand-in for tests).",
    )

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO")

    # -- running for months (issue 50): health and metrics, logs, replays ----------------------
    metrics_host: str = Field(
        "127.0.0.1", description="Address /healthz and /metrics listen on with metrics_port."
    )
    metrics_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="Port for /healthz and /metrics of a process without the web adapter (a "
        "worker); none: only on the web adapter's port.",
    )
    log_format: Literal["text", "json"] = Field(
        "text", description="text: for people; json: one JSON object a line, for a log shipper."
    )
    log_file: Path | None = Field(None, description="A log file besides the console, rotated.")
    log_file_bytes: int = Field(
        10_000_000, ge=1024, description="Size at which the log file rotates."
    )
    log_file_backups: int = Field(5, ge=0, le=1000, description="Rotated log files kept.")
    replay_retention_days: int = Field(
        30,
        ge=0,
        description="Game days a replay keeps, one file a day (<name>.<day>.jsonl); 0: every day.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = TomlConfigSettingsSource(settings_cls, toml_file=config_file())
        return (init_settings, env_settings, toml)

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, url: str | None) -> str | None:
        """A URL SQLAlchemy can open with an installed driver (never echoed: it may hold a
        password)."""
        if url is None:
            return url
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError

        hint = "e.g. postgresql+psycopg://user:password@host/db or sqlite:///path/bottown.db"
        if url.startswith("postgres://"):
            raise ValueError(f"postgres:// is spelled postgresql:// here; {hint}")
        try:
            dialect = make_url(url).get_dialect()
        except (ArgumentError, NoSuchModuleError):
            raise ValueError(f"not a database URL SQLAlchemy knows; {hint}") from None
        try:
            dialect.import_dbapi()
        except ImportError as exc:
            raise ValueError(f"its driver is not installed ({exc.name}); {hint}") from None
        return url

    @model_validator(mode="after")
    def _check_brain(self) -> Settings:
        if self.brain == "llm" and not (self.llm_base_url or self.llm_api_key):
            raise ValueError("brain = 'llm' needs llm_base_url or llm_api_key")
        return self

    @model_validator(mode="after")
    def _check_reactions(self) -> Settings:
        _ = self.moods  # a clear error for a reaction in both sets
        return self

    @property
    def moods(self) -> Moods:
        """Which reactions rate a message up, which down."""
        up, down = self.reactions_up.replace(",", " "), self.reactions_down.replace(",", " ")
        return Moods.of_lists(up.split(), down.split())

    @model_validator(mode="after")
    def _check_demo_start(self) -> Settings:
        parse_game_time(self.demo_start)  # a clear error for a start that is no game time
        return self

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'bottown.db'}"

    @property
    def backups_dir(self) -> Path:
        """Where the copy of the database made before an upgrade goes."""
        return self.data_dir / "backups"

    def secrets(self) -> list[str]:
        """Every secret's value, for the log filter that masks them."""
        values = [getattr(self, name) for name in type(self).model_fields]
        return [v.get_secret_value() for v in values if isinstance(v, SecretStr)]

    @property
    def uses_llm(self) -> bool:
        if self.brain == "auto":
            return bool(self.llm_base_url or self.llm_api_key)
        return self.brain == "llm"


def config_file() -> Path | None:
    named = os.environ.get(CONFIG_ENV)
    if named:
        path = Path(named)
        if not path.is_file():
            raise SettingsError(f"{CONFIG_ENV} names {path}, which is not a file")
        return path
    default = Path(DEFAULT_CONFIG_FILE)
    return default if default.is_file() else None


def load_settings(**overrides: object) -> Settings:
    """Read the settings, turning validation errors into one readable ``SettingsError``."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        source = config_file()
        where = f" (environment or {source})" if source else " (environment)"
        lines = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "settings"
            reason = err["msg"]
            if err["type"] == "extra_forbidden":
                reason = "unknown key: check its spelling"
                if key in REMOVED_KEYS:
                    reason = f"unknown key: it was removed ({REMOVED_KEYS[key]}); delete it"
            lines.append(f"{key}: {reason}")
        if len(lines) == 1:  # one red line
            raise SettingsError(f"invalid settings{where}: {lines[0]}") from None
        body = "\n".join(f"  {line}" for line in lines)
        raise SettingsError("invalid settings" + where + ":\n" + body) from None
    except Exception as exc:  # a TOML syntax error, for one
        if isinstance(exc, SettingsError):
            raise
        raise SettingsError(f"cannot read settings: {exc}") from None


def masked_url(url: str) -> str:
    """A URL fit for logs: any password replaced by ***."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1] if "@" in url else url
