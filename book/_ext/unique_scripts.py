"""A Sphinx extension for the book: each page's scripts once.

sphinx-thebe adds its configuration script in an ``env-before-read-docs`` handler, which Jupyter Book
runs twice, so every page declared ``const THEBE_JS_URL`` twice and the browser raised a SyntaxError
on load (``tests/test_notebooks.py``'s browser test found it). This drops a script identical to an
earlier one of the same page (an inline script's file name is None once and "" the other time)."""


def _unique_scripts(app, pagename, templatename, context, doctree):
    scripts, seen = [], set()
    for script in context.get("script_files", []):
        key = (getattr(script, "filename", str(script)) or "", str(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            scripts.append(script)
    context["script_files"] = scripts


def setup(app):
    app.connect("html-page-context", _unique_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
