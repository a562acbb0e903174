# The two commands of the README: `make book` and `make test`. Both set up .venv on first use.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.negbook-installed

.PHONY: install test book bench lab clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first, pinned to the builds that install offline here (pyproject pins the same).
	# pip byte-compiles each package's files one at a time as it installs it; installing without that and
	# compiling the whole environment once on every core afterwards gives the same .pyc files in less time
	# (measured by bench/install_compile.py). Like pip, the pass skips the files this Python cannot compile
	# (torch ships a test helper in Python 3.12's syntax).
	$(PY) -m pip install --quiet --no-compile torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install --quiet --no-compile -e ".[book,dev]"
	$(PY) -c "import compileall, sysconfig; compileall.compile_dir(sysconfig.get_path('purelib'), quiet=2, workers=0)"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

book: $(STAMP)
	$(PY) -m negutils.run --profile cpu

# JupyterLab on notebooks/ with jupytext's contents manager: a chapter's .md opens as a notebook and saves back to MyST
lab: $(STAMP)
	$(PY) -m pip install --quiet -e ".[book,dev,lab]"
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks \
		--ServerApp.contents_manager_class=jupytext.TextFileContentsManager

bench: $(STAMP)
	$(PY) bench/tap_overhead.py
	$(PY) bench/offline_error.py
	$(PY) bench/world_render.py
	$(PY) bench/feature_cache.py
	$(PY) bench/training_free_overhead.py
	$(PY) bench/chapter_concurrency.py
	$(PY) bench/peakpatch_training.py
	$(PY) bench/scn_pairwise.py
	$(PY) bench/optimizer_step.py
	$(PY) bench/pretrain_step.py
	$(PY) bench/install_compile.py
	$(PY) bench/organism_probe.py
	$(PY) bench/parse_set.py --revisions 934bf9c

clean:
	rm -rf artifacts book/_build
