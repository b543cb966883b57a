# icesink: `make demo` and `make test` work on a fresh machine (Python 3.11, Java 17).
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.icesink-installed
PYTEST_ARGS ?=

export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: env system-deps demo demo-cluster demo-kafka test test-fast test-faults test-kafka test-deploy test-interop lint docs format bench bench-peers bench-upsert bench-routing bench-deploy bench-scale bench-kafka-connect clean

# The virtual environment; Spark's Kafka source for this pyspark and Apache Kafka for the tests'
# broker, fetched with mvn into the venv (jvm/*/pom.xml, once); Apicurio Registry for the tests'
# schema registry, built there with mvn from jvm/apicurio-registry/pom.xml (once, about 2 minutes
# and 210 MB of Maven downloads); and the Spark driver's class archive for this Java and Spark
# (made once, about a minute; jobs and tests then start their JVMs in about half the time).
env: $(STAMP)
	$(PY) -m icesink.jobs.fetch_jvm_jars
	$(PY) -m icesink.jobs.make_class_archive

# Iceberg Java, the tests' second reader of icesink's tables (tests/support/iceberg_java/): the
# Spark its runtime jar is built for, in a virtual environment of its own, and the jars of that
# folder's pom.xml (Iceberg's Spark runtime, the SQLite and PostgreSQL JDBC drivers,
# Iceberg's AWS bundle for S3), made once.
ICEBERG_JAVA := $(VENV)/share/icesink/iceberg-java
ICEBERG_JAVA_PYSPARK := 4.1.1
env: $(ICEBERG_JAVA)/.installed-$(ICEBERG_JAVA_PYSPARK)

$(ICEBERG_JAVA)/.installed-$(ICEBERG_JAVA_PYSPARK): tests/support/iceberg_java/pom.xml
	@if ! command -v mvn >/dev/null; then \
		echo "no Maven (mvn): Iceberg Java's reader not installed (make test installs Maven first)" >&2; \
	else \
		set -ex; \
		mkdir -p $(ICEBERG_JAVA); \
		test -x $(ICEBERG_JAVA)/venv/bin/python || $(PYTHON) -m venv $(ICEBERG_JAVA)/venv; \
		$(ICEBERG_JAVA)/venv/bin/python -m pip install -q 'pyspark[sql]==$(ICEBERG_JAVA_PYSPARK)'; \
		rm -rf $(ICEBERG_JAVA)/jars; \
		mvn -q -f tests/support/iceberg_java/pom.xml dependency:copy-dependencies \
			-DexcludeTransitive=true -DoutputDirectory=$(abspath $(ICEBERG_JAVA))/jars; \
		touch $@; \
	fi

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

system-deps:
	./scripts/install_system_deps.sh

demo: env
	$(PY) -m icesink.jobs.demo

# SeaweedFS (S3 + REST catalog) and a two-worker Spark cluster on loopback, stopped at the end.
demo-cluster: env
	$(PY) -m icesink.jobs.demo_cluster

# An Apache Kafka broker on loopback (the jars make env fetched), 20,000 JSON messages, the Kafka
# job on the embedded default until it has them all, what it wrote; the broker stopped at the end.
# Spark's connector instead of the Python source: make demo-kafka DEMO_KAFKA_ARGS="--source jvm"
DEMO_KAFKA_ARGS ?=
demo-kafka: env
	$(PY) -m icesink.jobs.demo_kafka $(DEMO_KAFKA_ARGS)

# pytest exits 5 when it collects no test; make (and so CI) fails on that as on any failure.
# system-deps first: make env fetches with its Maven.
test: system-deps env
	$(PY) -m pytest -q $(PYTEST_ARGS)

test-fast: env
	$(PY) -m pytest -q tests/unit $(PYTEST_ARGS)

# Every fault of tests/faults/harness.py in both commit modes at every batch (a seeded
# selection of them runs in make test), and the SIGKILL runs kept out of make test.
test-faults: system-deps env
	$(PY) -m pytest -q -m faults_full tests $(PYTEST_ARGS)

# The Kafka job's end-to-end tests on both of its sources where the second adds minutes and little
# news (make test runs each such behaviour on one source).
test-kafka: system-deps env
	$(PY) -m pytest -q -m kafka_full tests/e2e $(PYTEST_ARGS)

# Iceberg Java's maintenance while a stream writes, on the SQLite catalog (appends; make test runs
# the upserts) and on PostgreSQL and SeaweedFS's REST catalog with S3.
test-interop: system-deps env
	$(PY) -m pytest -q -m interop_full tests/interop $(PYTEST_ARGS)

# Real servers on loopback: SeaweedFS (S3 + REST catalog), PostgreSQL, Spark cluster, Spark Connect;
# with the Spark cluster's own checks, which make test leaves to the sink's cluster test.
test-deploy: system-deps env
	$(PY) -m pytest -q -m "deploy or cluster_full" tests/deploy $(PYTEST_ARGS)

# ruff, mypy (strict on the library; jobs, benchmarks, tests and scripts with the config's
# settings), the layout check (module and function sizes, import direction and cycles) and
# the docs' checks: docs/options.md as the models give it, docs/architecture.md naming every
# module, and no link of the docs to a missing file or heading.
lint: env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy --strict icesink --exclude '^icesink/jobs/'
	$(VENV)/bin/mypy
	$(PY) scripts/check_layout.py
	$(PY) scripts/options_doc.py --check
	$(PY) scripts/check_docs.py

# docs/options.md, the option reference, from the configuration models (a second or two).
docs: env
	$(PY) scripts/options_doc.py

format: env
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: env
	$(PY) -m benchmarks.run

# icesink against Iceberg Java's Spark streaming sink (none/hash/range) and Spark's Parquet sink, every
# writer on the Spark of Iceberg's runtime (make env's iceberg-java venv), 10 x 1M rows, 3 alternating
# rounds of fresh processes (about an hour on 2 cores); quicker with e.g.
# make bench-peers PEERS_ARGS="--batches 3 --rows-per-batch 200000 --rounds 1"
PEERS_ARGS ?=
bench-peers: env
	$(PY) -m benchmarks.peers $(PEERS_ARGS)

# Full size by default (10M rows, 100 x 100k changes: hours); smaller with e.g.
# make bench-upsert UPSERT_ARGS="--rows 100000 --batch-size 2000 --batches 4 --pyiceberg-batches 1"
UPSERT_ARGS ?=
bench-upsert: env
	$(PY) -m benchmarks.upsert $(UPSERT_ARGS)

# 200 topics x 5,000 messages routed to 200 tables against 1 topic x 1M into one, 3 rounds;
# smaller with e.g. make bench-routing ROUTING_ARGS="--topics 50 --single-messages 250000 --rounds 2"
ROUTING_ARGS ?=
bench-routing: env
	$(PY) -m benchmarks.routing_tables $(ROUTING_ARGS)

# SeaweedFS S3 + REST catalog against the local warehouse, then two 1-core workers against
# local[2] on S3, 10 x 1M rows, 3 alternating rounds; quicker with e.g.
# make bench-deploy DEPLOY_ARGS="--batches 3 --rows-per-batch 200000 --rounds 1"
DEPLOY_ARGS ?=
bench-deploy: env
	$(PY) -m benchmarks.deploy $(DEPLOY_ARGS)

# One micro-batch's cost against rows, partition values, tables, input tasks, snapshots kept and
# executors (local[2], then standalone clusters of 1 and 2 one-core Workers): about 20 minutes;
# fewer points with e.g. make bench-scale SCALE_ARGS="--axes rows,partitions --rows-points 100000,400000"
SCALE_ARGS ?=
bench-scale: env
	$(PY) -m benchmarks.scale $(SCALE_ARGS)

# The Kafka job against Iceberg's Kafka Connect sink, 200,000 messages, 3 alternating rounds, each
# run a new process (Kafka Connect and Iceberg's sink fetched with mvn into ~/.cache the first time);
# e.g. make bench-kafka-connect KAFKA_CONNECT_ARGS="--messages 50000 --rounds 1"
KAFKA_CONNECT_ARGS ?=
bench-kafka-connect: env
	$(PY) -m benchmarks.kafka_connect $(KAFKA_CONNECT_ARGS)

clean:
	rm -rf $(VENV) demo-data .pytest_cache .mypy_cache .ruff_cache
