-- Run once by the postgres image when its data volume is first initialised (as POSTGRES_USER).
-- Temporal's two databases; statecore's own database is POSTGRES_DB. The schema job
-- (temporal-schema.sh) only sets up and upgrades schemas, which it can safely repeat, while
-- CREATE DATABASE cannot be repeated: that is why creation happens here.
CREATE DATABASE temporal;
CREATE DATABASE temporal_visibility;
