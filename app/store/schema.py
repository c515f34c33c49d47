"""The store's schema as numbered migrations (never edit a shipped one: append a new one).

Times are UNIX seconds (REAL); ids are opaque strings; JSON columns hold ``json.dumps`` text.
Messages and events keep their insertion order (``rowid`` and ``seq``). Statements are split on
``;``, so a migration must not contain one inside a statement.
"""

from __future__ import annotations

MIGRATION_1 = """
CREATE TABLE users (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created REAL NOT NULL
);
CREATE TABLE tokens (
    hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('api', 'session', 'login')),
    created REAL NOT NULL,
    expires REAL
);
CREATE INDEX tokens_user ON tokens(user_id);
CREATE TABLE provider_keys (
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    provider TEXT NOT NULL,
    secret BLOB NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (user_id, provider)
);
CREATE TABLE chats (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    created REAL NOT NULL,
    sandbox_id TEXT
);
CREATE INDEX chats_user ON chats(user_id, created);
CREATE TABLE messages (
    id TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content TEXT NOT NULL,
    data TEXT,
    created REAL NOT NULL
);
CREATE INDEX messages_chat ON messages(chat_id);
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    message_id TEXT REFERENCES messages(id) ON DELETE SET NULL,
    provider TEXT,
    model TEXT,
    template TEXT,
    status TEXT NOT NULL
        CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
    stop_reason TEXT,
    turns INTEGER NOT NULL DEFAULT 0,
    usage TEXT NOT NULL DEFAULT '{}',
    sandbox_id TEXT,
    preview_url TEXT,
    error TEXT,
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    worker TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    reply_id TEXT REFERENCES messages(id) ON DELETE SET NULL
);
CREATE INDEX runs_status ON runs(status);
CREATE INDEX runs_chat ON runs(chat_id, created);
CREATE INDEX runs_user ON runs(user_id, status);
CREATE TABLE run_events (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE checkpoints (
    run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    data TEXT NOT NULL,
    updated REAL NOT NULL
)
"""

# Images attached to a user's message (issue 26): kept in the database, not in the project, and
# gone with their message (and so with the chat) by the cascade.
MIGRATION_2 = """
CREATE TABLE message_images (
    id TEXT PRIMARY KEY,
    message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    media_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    data BLOB NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX message_images_message ON message_images(message_id, ordinal)
"""

# A chat's git remote (issue 27): where ``POST /api/chats/{id}/push`` sends its versions. The
# token is Fernet-encrypted (app/store/crypto.py), NULL when none; last_push is JSON text.
MIGRATION_3 = """
CREATE TABLE chat_remotes (
    chat_id TEXT PRIMARY KEY REFERENCES chats(id) ON DELETE CASCADE,
    url TEXT NOT NULL,
    branch TEXT NOT NULL,
    token BLOB,
    updated REAL NOT NULL,
    last_push TEXT
)
"""

# Published apps (issue 27): one row per chat that was ever published. ``slug`` names its origin
# (``<slug>.apps.<public host>``) and stays the chat's for good; ``manifest`` is the
# publication's content-addressed manifest (app/publish), NULL while unpublished: re-publishing
# or unpublishing is one UPDATE of it.
MIGRATION_4 = """
CREATE TABLE publications (
    chat_id TEXT PRIMARY KEY REFERENCES chats(id) ON DELETE CASCADE,
    slug TEXT NOT NULL UNIQUE,
    manifest TEXT,
    version INTEGER,
    updated REAL NOT NULL
)
"""

# Each chat's app environment (issue 27): every value encrypted with the store's SecretBox (a
# plain variable too: one rule, and a database copy shows no configuration either); ``secret``
# is 0 or 1 (a secret is never returned by the API).
MIGRATION_5 = """
CREATE TABLE app_env (
    chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    value BLOB NOT NULL,
    secret INTEGER NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (chat_id, name)
)
"""

# The deployment (issue 28): what every host of one deployment must agree on, written by the first
# host to start on this database (``INSERT OR IGNORE``: later hosts compare, never overwrite):
# ``id`` (the database's identity: the instance claim and the Redis and project store markers
# name it), ``secret_key`` (a fingerprint, never the key), ``instance``.
MIGRATION_6 = """
CREATE TABLE deployment (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    written REAL NOT NULL
)
"""

# Publish jobs (issue 27's hardening): a publish runs in the background and its progress is
# read from here by any host. ``active`` is the chat's id while the job runs and NULL once it
# ended: UNIQUE (NULLs never clash, on SQLite and Postgres alike), so a chat has one running
# publish at a time. ``code``/``message``: a failure in words. The user's rows of the last hour
# are the publish rate limit's count.
MIGRATION_7 = """
CREATE TABLE publish_jobs (
    id TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    stage TEXT NOT NULL,
    active TEXT UNIQUE,
    code TEXT,
    message TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX publish_jobs_chat ON publish_jobs(chat_id, created);
CREATE INDEX publish_jobs_user ON publish_jobs(user_id, created)
"""

MIGRATIONS: tuple[str, ...] = (
    MIGRATION_1,
    MIGRATION_2,
    MIGRATION_3,
    MIGRATION_4,
    MIGRATION_5,
    MIGRATION_6,
    MIGRATION_7,
)
