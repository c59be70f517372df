"""controller: see the package docstring of ansible_operator for where this layer sits."""
