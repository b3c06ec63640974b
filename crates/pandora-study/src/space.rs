//! Search spaces (see the module docs once written).
