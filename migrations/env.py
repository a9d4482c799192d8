"""Alembic environment: async engines, the models' metadata, batch mode on SQLite.

Two ways in. ``app.store.db.upgrade_async`` passes an open connection through
``config.attributes["connection"]`` and runs this file inside ``run_sync``; the ``alembic``
command line passes nothing, and a migration engine is built here from ``-x url=...``, else
``GATEWAY_STORAGE__URL``, else ``sqlalchemy.url``.
"""

import asyncio
import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection

from app.store.db import create_migration_engine
from app.store.tables import Base

config = context.config
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def database_url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url")
    url = url or os.environ.get("GATEWAY_STORAGE__URL") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: pass -x url=... or set GATEWAY_STORAGE__URL")
    return url


def run_migrations_offline() -> None:
    context.configure(
        url=database_url(),
        target_metadata=Base.metadata,
        literal_binds=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations(connection: Connection) -> None:
    # Alembic calls SQLite DDL non-transactional and so wraps each revision in a transaction
    # of its own; create_migration_engine makes that transaction real (BEGIN ... COMMIT).
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        # The gateway's migration says each revision it applies (app/store/schema.py).
        on_version_apply=config.attributes.get("on_version_apply", ()),
    )
    with context.begin_transaction():
        context.run_migrations()


async def run_migrations_with_own_engine() -> None:
    engine = create_migration_engine(database_url())
    try:
        async with engine.connect() as connection:
            await connection.run_sync(run_migrations)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
elif (connection := config.attributes.get("connection")) is not None:
    run_migrations(connection)
else:
    asyncio.run(run_migrations_with_own_engine())
