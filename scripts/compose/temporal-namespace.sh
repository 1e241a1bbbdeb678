#!/bin/sh
# One-shot job (temporalio/admin-tools): create the Temporal namespace statecore runs in and
# statecore's search attributes on it, each only if missing, so it is safe to run again.
# STATECORE_SEARCH_ATTRIBUTES lists them as NAME=Type pairs separated by spaces.
set -eu
: "${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS is required}"
: "${STATECORE_SEARCH_ATTRIBUTES:?STATECORE_SEARCH_ATTRIBUTES is required}"
NAMESPACE="${TEMPORAL_NAMESPACE:-default}"
RETENTION="${TEMPORAL_NAMESPACE_RETENTION:-7d}"
ATTEMPTS="${SETUP_ATTEMPTS:-60}"

# A fresh server, or a namespace created a moment ago, needs a few seconds before it answers.
retry() {
  n=1
  until "$@"; do
    if [ "$n" -ge "$ATTEMPTS" ]; then
      echo "gave up after $ATTEMPTS attempts: $*" >&2
      return 1
    fi
    n=$((n + 1))
    sleep 2
  done
}

t() {
  temporal --address "$TEMPORAL_ADDRESS" "$@"
}

retry t operator cluster health >/dev/null
if t operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1; then
  echo "namespace $NAMESPACE exists"
else
  retry t operator namespace create --namespace "$NAMESPACE" --retention "$RETENTION"
  echo "namespace $NAMESPACE created"
fi

for pair in $STATECORE_SEARCH_ATTRIBUTES; do
  name="${pair%%=*}"
  type="${pair#*=}"
  existing=$(retry t operator search-attribute list --namespace "$NAMESPACE")
  if printf '%s\n' "$existing" | grep -qw "$name"; then
    echo "search attribute $name exists"
  else
    retry t operator search-attribute create --namespace "$NAMESPACE" --name "$name" --type "$type"
    echo "search attribute $name ($type) created"
  fi
done
