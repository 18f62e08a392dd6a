"""The ``NCCL_DEBUG=INFO`` log importer: records, formats, communicators, jobs, HCCL rank tables.

``records`` splits physical lines into messages, ``formats`` reads each message kind, ``parse``
groups them by communicator, ``commwork`` rebuilds rings and joins per-process instances,
``tojob`` and ``hostmap`` turn communicators into jobs, ``hccl`` reads Ascend rank tables,
``bench`` measures it all. The public entry points are re-exported by
:mod:`icefabric.control.ccl.nccl_log`.
"""
