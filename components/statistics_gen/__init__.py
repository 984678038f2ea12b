"""StatisticsGen that samples serialized examples before decoding them (#33).

TFX's StatisticsGen decodes every example and then, if ``StatsOptions.sample_rate`` is
set, drops the unsampled ones; decoding (~75 µs a ~3 KB example) is most of its cost.
This one keeps TFX's spec, inputs, outputs and artifact properties and draws the sample
from the serialized records (``sampling.py``), so an unsampled example costs only its
read. Import the component from ``components.statistics_gen.component`` (it imports TFX).
"""
