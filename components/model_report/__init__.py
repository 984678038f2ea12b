"""ModelReport: HTML report with plots + TensorBoard summaries of one evaluation.

Import the component from ``components.model_report.component`` (it imports TFX);
``report`` (plots + HTML), ``tb_summaries`` (TensorBoard), ``discretization`` (EAD vs
equal frequency / width) and ``inputs`` (reading the upstream artifacts) are the parts.
"""
