"""What if: replay a past window under proposed quota, node and scaling changes."""
