"""The config tree: its sections, each field declared once, the script section, YAML as people write it."""
