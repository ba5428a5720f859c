if __name__ != "runonce.streams":  # the folder is runonce.streams (runonce/streams links here); one import path only
    raise ImportError(f"import runonce.streams, not {__name__}: a second copy of these modules would have "
                      "Enums, settings and state of its own")
