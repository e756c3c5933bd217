"""nbgrader configuration for the course's exercises (copied into a course directory by
`python tools/make_student_notebooks.py --nbgrader-course DIR`).

Each chapter is an assignment; its source notebooks are the instructor masters. The one thing the
defaults lack: the masters' instructor-only cells (tag `instructor`) are dropped from the released
version, as tools/make_student_notebooks.py drops them from the student copies in the repository.
"""

from nbconvert.preprocessors import TagRemovePreprocessor
from nbgrader.converters import GenerateAssignment

c = get_config()  # noqa: F821 (defined by the config loader)

c.CourseDirectory.course_id = "encoders-from-scratch"
c.GenerateAssignment.preprocessors = [
    TagRemovePreprocessor,
    *GenerateAssignment.class_traits()["preprocessors"].default(),
]
c.TagRemovePreprocessor.enabled = True
c.TagRemovePreprocessor.remove_cell_tags = {"instructor"}
# Checks run a few small models on CPU; leave room on a slow machine.
c.Execute.timeout = 300
