# Front door of the project. Every target sets up what it needs (the venv first).
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV        ?= .venv
PORT        ?= 3000
STACK_NAME  ?= support-tickets
BIN         := $(VENV)/bin
PY          := $(BIN)/python
# uv installs the pinned requirements into the venv (pip, bootstrapping it, takes
# minutes where uv takes seconds); the venv keeps pip for sam build.
UV_VERSION  := 0.13.9
UV          := $(BIN)/uv
REQUIREMENTS := requirements-dev.txt layers/shared/requirements.txt layers/shared/lambda-runtime.txt \
                functions/authorizer/requirements.txt
STAMP       := $(VENV)/.installed-$(shell echo $(UV_VERSION) | cat - $(REQUIREMENTS) | cksum | cut -d' ' -f1)
# A stand-in for what the python3.13 runtime provides (boto3 and its
# dependencies, byte-compiled as the runtime's are): tests and benchmarks put it
# on the import path after the layer, where Lambda has /var/lang/lib/python3.13/site-packages.
RUNTIME_DIR := .aws-sam/lambda-runtime
RUNTIME     := $(RUNTIME_DIR)/.installed-$(shell cat layers/shared/lambda-runtime.txt | cksum | cut -d' ' -f1)
# checkov (the template's security scan, tests/unit/test_checkov.py) in a venv of
# its own: its pins conflict with requirements-dev.txt (packaging<24 vs pytest's >=24).
CHECKOV_VENV := .venv-checkov
CHECKOV      := $(CHECKOV_VENV)/.installed-$(shell cat requirements-checkov.txt | cksum | cut -d' ' -f1)
# The tests' independent IAM engine (tests/oracle: iam-simulate, AGPL-3.0, a
# test-time tool only), installed from its lockfile once per lockfile.
ORACLE_DIR  := tests/oracle
ORACLE      := $(ORACLE_DIR)/node_modules/.installed-$(shell cat $(ORACLE_DIR)/package-lock.json | cksum | cut -d' ' -f1)
# sam build looks for python3.13 on PATH: the venv's interpreter is exactly that.
export PATH := $(abspath $(BIN)):$(PATH)
export SAM_CLI_TELEMETRY := 0
# The layer package and the local stack import by the same names in tools and tests.
export PYTHONPATH := $(CURDIR)/layers/shared:$(CURDIR)

# The operators' inputs (TENANT=, USERS=, STACK=, ARGS=...) reach a recipe as
# environment variables, never as its text: `$(call takes,<target>,<names>)`
# exports each name into that target's recipe, which reads it as "$$NAME" (a
# parameter expansion: the shell never parses the value, so no `…`, $(…), ;
# or " in it runs). Each is first made a simple variable holding its text as
# given (`$(value ...)`), so that make does not expand a $(…) in it either.
# $(if $(NAME),...) in a recipe is make's test of the value, never its text.
takes = $(foreach name,$(2),$(eval override $(name) := $$(value $(name)))$(eval $(1): export $(name) := $$($(name))))

.PHONY: help venv dev token events test test-deep test-fast lint lint-code format typecheck build validate deploy delete \
        bench reconcile onboard cells tenant dedicated export usage offboard openapi docs integration oracle checkov clean

$(call takes,help,PORT)
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk -F':.*## ' '{ text = $$2; shown = ""; \
	    while ((at = index(text, "$$(PORT)")) > 0) { shown = shown substr(text, 1, at - 1) ENVIRON["PORT"]; text = substr(text, at + 7) } \
	    printf "  make %-11s %s\n", $$1, shown text }'

$(STAMP): $(REQUIREMENTS) .python-version
	@py=$$(scripts/find-python.sh) && \
	  { [ -x $(PY) ] && $(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' || \
	    { rm -rf $(VENV) && echo "creating $(VENV) with $$py" && $$py -m venv $(VENV); }; }
	$(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(UV) pip install --quiet --python $(PY) -r requirements-dev.txt
	@rm -f $(VENV)/.installed-* && touch $@

venv: $(STAMP) ## create the virtualenv (Python 3.13) and install the pinned dependencies

$(ORACLE): $(ORACLE_DIR)/package.json $(ORACLE_DIR)/package-lock.json
	cd $(ORACLE_DIR) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

oracle: $(ORACLE) ## install the tests' IAM oracle (npm ci in tests/oracle, from its lockfile)

$(CHECKOV): requirements-checkov.txt $(STAMP)
	rm -rf $(CHECKOV_VENV)
	$(PY) -m venv --without-pip $(CHECKOV_VENV)
	$(UV) pip install --quiet --python $(CHECKOV_VENV)/bin/python -r requirements-checkov.txt
	@touch $@

checkov: $(CHECKOV) ## install checkov into .venv-checkov (from requirements-checkov.txt)

# ARGS: split into words by ops.shell_args (shlex: quotes group, nothing is expanded).
# CELLS: unset or 1, one stack (no --cells at all); otherwise that many cells behind the router.
$(call takes,dev,PORT ARGS CELLS)
dev: $(STAMP) ## run the whole API on http://127.0.0.1:$(PORT), no AWS, no Docker: make dev [PORT=<n>] [CELLS=<2-8>] [ARGS="<serve options>", e.g. ARGS=--tenant-isolation]; Ctrl-C stops it and forgets its data and tokens
	$(PY) -m ops.shell_args $(PY) -m local_stack serve --port="$$PORT" $(if $(CELLS),$(if $(filter 1,$(CELLS)),,--cells="$$CELLS"),)

$(call takes,token,TENANT USER)
token: $(STAMP) ## print an ID token: make token TENANT=<t> USER=<u> [ADMIN=1]
	@$(PY) -m local_stack token --tenant="$$TENANT" --user="$$USER" $(if $(filter 1 true yes,$(ADMIN)),--admin,)

events: $(STAMP) ## while make dev runs: .local/events/ = events/ with fresh tokens (sam local invoke -e)
	@$(PY) -m local_stack events

# USERS and ADMINS: one argument each; the command splits them at blanks (user names have none).
# CONTROL_PLANE: deployed cells' control plane stack (docs/cells.md, "Deploying"); onboarding places the tenant.
$(call takes,onboard,TENANT USERS ADMINS STACK CONTROL_PLANE REGION)
onboard: $(STAMP) ## create tenant users: make onboard TENANT=<t> USERS="a b" [ADMINS="c"] [STACK=<stack> | CONTROL_PLANE=<stack>] [REGION=<r>]
	@$(PY) -m local_stack onboard --tenant="$$TENANT" --users="$$USERS" $(if $(ADMINS),--admins="$$ADMINS",) \
	  $(if $(STACK),--stack="$$STACK",) $(if $(CONTROL_PLANE),--control-plane="$$CONTROL_PLANE",) \
	  $(if $(REGION),--region="$$REGION",)

# REGISTER: deployed cells' stacks, written into the directory first (one argument; split at blanks).
$(call takes,cells,DAY CONTROL_PLANE REGISTER REGION)
cells: $(STAMP) ## each cell's tenants, usage of the day and room (make dev CELLS=<n>, or deployed): make cells [DAY=YYYY-MM-DD] [CONTROL_PLANE=<stack> [REGISTER="<cell stack>..."] [REGION=<r>]]
	@$(PY) -m ops.cell_report $(if $(CONTROL_PLANE),--control-plane="$$CONTROL_PLANE",--local) \
	  $(if $(REGISTER),--register="$$REGISTER",) $(if $(REGION),--region="$$REGION",) $(if $(DAY),--day="$$DAY",)

$(call takes,tenant,TENANT SHARDS TIER STATUS PLACEMENT CELL MOVE_WORKERS MOVE_RATE DRAIN_SECONDS STACK CONTROL_PLANE REGION)
tenant: $(STAMP) ## show or change a tenant record: make tenant TENANT=<t> [SHARDS=<1-64>] [TIER=<tier>] [STATUS=ACTIVE|SUSPENDED] [PLACEMENT=pool|dedicated] [CELL=<cell>] [MOVE_WORKERS=<1-64>] [MOVE_RATE=<items/s>] [DRAIN_SECONDS=<s>] [STACK=<stack> [CONTROL_PLANE=<stack>] [REGION=<r>]]
	@$(PY) -m ops.tenants --tenant="$$TENANT" $(if $(SHARDS),--shards="$$SHARDS",) $(if $(TIER),--tier="$$TIER",) \
	  $(if $(STATUS),--status="$$STATUS",) $(if $(PLACEMENT),--placement="$$PLACEMENT",) $(if $(CELL),--cell="$$CELL",) \
	  $(if $(MOVE_WORKERS),--move-workers="$$MOVE_WORKERS",) $(if $(MOVE_RATE),--move-rate="$$MOVE_RATE",) \
	  $(if $(DRAIN_SECONDS),--drain-seconds="$$DRAIN_SECONDS",) \
	  $(if $(STACK),--stack="$$STACK",--local) $(if $(CONTROL_PLANE),--control-plane="$$CONTROL_PLANE",) \
	  $(if $(REGION),--region="$$REGION",)

$(call takes,dedicated,TENANT STACK REGION)
dedicated: $(STAMP) ## deploy a tenant's own table (no data moves: make tenant PLACEMENT=): make dedicated TENANT=<t> [STACK=<stack> [REGION=<r>]]
	@$(PY) -m ops.dedicated --tenant="$$TENANT" $(if $(STACK),--stack="$$STACK",--local) $(if $(REGION),--region="$$REGION",)

$(call takes,export,TENANT STACK REGION)
export: $(STAMP) ## a tenant's tickets, comments and history as JSON lines: make export TENANT=<t> [STACK=<stack>] > <t>.jsonl
	@$(PY) -m ops.export --tenant="$$TENANT" $(if $(STACK),--stack="$$STACK",--local) $(if $(REGION),--region="$$REGION",)

$(call takes,usage,TENANT DAY CHART STACK CONTROL_PLANE REGION)
usage: $(STAMP) ## usage and cost of a UTC day: make usage [TENANT=<t>] [DAY=YYYY-MM-DD] [CHART=<file>.png] [STACK=<stack> | CONTROL_PLANE=<stack>] [REGION=<r>]
	@$(PY) -m ops.usage $(if $(TENANT),--tenant="$$TENANT",) $(if $(DAY),--day="$$DAY",) $(if $(CHART),--chart="$$CHART",) \
	  $(if $(CONTROL_PLANE),--control-plane="$$CONTROL_PLANE",$(if $(STACK),--stack="$$STACK",--local)) \
	  $(if $(REGION),--region="$$REGION",)

$(call takes,offboard,TENANT CONFIRM STACK CONTROL_PLANE REGION KEY_WAITING_DAYS)
offboard: $(STAMP) ## erase a tenant's data and users: make offboard TENANT=<t> CONFIRM=<t> [STACK=<stack> [CONTROL_PLANE=<stack>] [REGION=<r>]] [KEY_WAITING_DAYS=<7-30>]
	@$(PY) -m ops.offboard --tenant="$$TENANT" $(if $(CONFIRM),--confirm="$$CONFIRM",) \
	  $(if $(STACK),--stack="$$STACK",--local) $(if $(CONTROL_PLANE),--control-plane="$$CONTROL_PLANE",) \
	  $(if $(REGION),--region="$$REGION",) \
	  $(if $(KEY_WAITING_DAYS),--key-waiting-days="$$KEY_WAITING_DAYS",)

# The template check is a test too (tests/unit/test_template.py): make test runs
# cfn-lint once, there (sam validate --lint is the same cfn-lint call).
# The test processes (xdist workers, the local stack, the commands and bench
# they start) import the same few thousand modules: they share bytecode caches
# even where the environment turns them off (the cold-start checks turn them
# off for the build they measure).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest
# One xdist worker more than the cores: a worker waiting on its local stack, a
# subprocess or a move's phase leaves its core to the others (TEST_WORKERS=<n> sets
# the count, taken as the operators' inputs are: the shell reads it, as one word). Whole
# files to a worker (a file's set-up runs once), in the order pytest collects them:
# the tiers whose files take longest (bench, e2e) go first, the unit tests' many
# short ones last, so the workers finish together (xdist's default would send the
# files with the most tests first, and a one-test file of a minute last).
XDIST := -n "$${TEST_WORKERS:-$$(( $$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN) + 1 ))}" \
         --dist loadscope --no-loadscope-reorder

# mypy runs beside pytest (its output after the tests'): it needs no build, and takes
# what CPU the workers leave while they wait.
# The oracle's and checkov's installs and sam build run side by side (each waits on
# the network or the disk as much as on a core).
$(call takes,test,TEST_WORKERS)
test: $(STAMP) ## the whole suite: ruff, sam build, then every test (template checks included) on all cores beside mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@$(MAKE) --no-print-directory -j3 $(ORACLE) $(CHECKOV) build
	@$(BIN)/mypy > .mypy.log 2>&1 & mypy=$$!; \
	  $(PYTEST) $(XDIST); tests=$$?; \
	  wait $$mypy; typed=$$?; echo "$(BIN)/mypy"; cat .mypy.log; rm -f .mypy.log; \
	  [ $$tests -eq 0 ] && [ $$typed -eq 0 ]

$(call takes,test-deep,TEST_WORKERS)
test-deep: $(STAMP) $(ORACLE) $(CHECKOV) ## make test at full depth: property tests, fuzzing, load and soak at full size (docs/testing.md)
	@$(MAKE) --no-print-directory -j2 lint-code build
	TEST_DEPTH=deep $(PYTEST) $(XDIST)

test-fast: $(STAMP) $(ORACLE) $(CHECKOV) ## tests only, against the current build
	$(PYTEST) -x -q

lint: lint-code ## ruff, mypy, cfn-lint, sam validate --lint
	$(BIN)/cfn-lint template.yaml templates/dedicated-table.yaml templates/control-plane.yaml
	$(BIN)/sam validate --lint --region us-east-1 >/dev/null

lint-code: $(STAMP) ## ruff and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP) ## apply ruff fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: $(STAMP)
	$(BIN)/mypy

build: $(STAMP) $(RUNTIME) ## sam build (layer and functions into .aws-sam/build, byte-compiled); TENANT_ISOLATION=1: the tenant isolation variant
	$(BIN)/sam build --cached --parallel
	$(if $(filter 1,$(TENANT_ISOLATION)),$(PY) -m stack_model.isolation .aws-sam/build/template.yaml)

$(RUNTIME): layers/shared/lambda-runtime.txt $(STAMP)
	rm -rf $(RUNTIME_DIR)
	$(UV) pip install --quiet --python $(PY) --no-deps --target $(RUNTIME_DIR)/python -r layers/shared/lambda-runtime.txt
	$(PY) -m compileall -q -j 0 --invalidation-mode unchecked-hash $(RUNTIME_DIR)/python
	@touch $@

$(call takes,deploy,ARGS)
deploy: build ## sam deploy (ARGS="<sam deploy options>"; first time: make deploy ARGS=--guided; TENANT_ISOLATION=1: build and deploy the tenant isolation variant)
	$(PY) -m ops.shell_args $(BIN)/sam deploy

$(call takes,delete,STACK_NAME)
delete: $(STAMP) ## sam delete (the table is retained)
	$(BIN)/sam delete --stack-name="$$STACK_NAME"

integration: $(STAMP) ## tests against a deployed stack: make integration AWS_SAM_STACK_NAME=<stack>
	$(BIN)/pytest tests/integration -m deployed

bench: build ## benchmarks: writes bench/results.json and bench/results.md
	$(PY) -m bench

$(call takes,reconcile,TENANT STACK REGION)
reconcile: $(STAMP) ## recount a tenant's tickets per status, repair stable drift: make reconcile TENANT=<t> [STACK=<stack> [REGION=<r>]] [REPAIR=1]
	@$(PY) -m ops.reconcile --tenant="$$TENANT" $(if $(STACK),--stack="$$STACK",--local) $(if $(REGION),--region="$$REGION",) \
	  $(if $(filter 1 true yes,$(REPAIR)),--repair,)

openapi: $(STAMP) ## regenerate docs/openapi.json from the handlers' models
	$(PY) -m ops.openapi > docs/openapi.json

docs: $(STAMP) ## regenerate the docs' generated parts (route table, module map, the README's functions) from the code
	$(PY) -m ops.docs

clean: ## remove build output and the venv
	rm -rf .aws-sam .local $(VENV) $(CHECKOV_VENV) .pytest_cache .mypy_cache .ruff_cache $(ORACLE_DIR)/node_modules
