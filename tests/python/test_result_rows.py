"""recipes/lib/result_rows.py: a run that measures some methods (ONLY=...) keeps the other rows of the
CSV only when they were made at its settings, refuses otherwise with a one-line error, and replaces the
CSV at once."""
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "recipes" / "lib"))
from result_rows import earlier_rows, kept_row, write_rows  # noqa: E402


def refusal(earlier, name, settings, path):
    """The message kept_row exits with, or None when it returns."""
    try:
        kept_row(earlier, name, settings, path, "recipe.sh")
    except SystemExit as stop:
        return str(stop.code)
    return None


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kl.csv")
        assert earlier_rows(path) == {}
        rows = [{"method": "h2o", "spec": "h2o --budget 512", "kl": "0.14", "ctx": "2048"},
                {"method": "d2o", "spec": "d2o --budget 512", "kl": "0.12", "ctx": "2048"}]
        write_rows(path, rows)
        assert sorted(os.listdir(tmp)) == ["kl.csv"], os.listdir(tmp)  # no .part left behind
        earlier = earlier_rows(path)
        assert list(earlier) == ["h2o", "d2o"]
        assert earlier["d2o"]["kl"] == "0.12"

        # Same settings (numbers compared as the CSV's text): the earlier row, unchanged.
        same = {"spec": "d2o --budget 512", "ctx": 2048}
        assert kept_row(earlier, "d2o", same, path, "recipe.sh") == rows[1]
        # No earlier row: nothing to keep, no error.
        assert kept_row(earlier, "roco", same, path, "recipe.sh") is None
        # Another budget or context: refused, naming the method and the columns that differ.
        message = refusal(earlier, "d2o", {"spec": "d2o --budget 256", "ctx": 2048}, path)
        assert message is not None and "\n" not in message, message
        assert "d2o" in message and "spec" in message and "ctx" not in message, message
        message = refusal(earlier, "h2o", {"spec": "h2o --budget 512", "ctx": 1024}, path)
        assert message is not None and "'2048'" in message and "'1024'" in message, message
        # A column the earlier CSV lacks counts as made otherwise.
        assert refusal(earlier, "h2o", {"spec": "h2o --budget 512", "threads": 2}, path) is not None

        # A rewrite replaces the file whole; an empty one is refused and leaves the file as it was.
        write_rows(path, rows[:1])
        assert list(earlier_rows(path)) == ["h2o"]
        try:
            write_rows(path, [])
            raise AssertionError("write_rows accepted no rows")
        except SystemExit:
            pass
        assert list(earlier_rows(path)) == ["h2o"]
    print("result_rows: ok")


if __name__ == "__main__":
    main()
