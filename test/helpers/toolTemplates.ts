/**
 * Chat templates for tool-calling tests, written for this project in the common shapes: `hermesTools`
 * offers tools in the system message as JSON lines and writes calls as JSON inside <tool_call> tags
 * (the style of many open models' templates); `llama2` (the demo's) has no place for tools, so
 * node-llama-cpp documents them in the system prompt and uses its own call syntax.
 */
import {demoChatTemplates} from "../../engine/model/demoModel.js";

export const toolTemplates = {
    hermesTools:
        "{%- if tools %}<|im_start|>system\n" +
        "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}" +
        "You may call functions. Their signatures, one JSON object per line, inside <tools></tools>:\n<tools>\n" +
        "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}</tools>\n" +
        "To call one, answer with <tool_call>\n{\"name\": <function-name>, \"arguments\": <arguments-object>}\n</tool_call><|im_end|>\n" +
        "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}" +
        "{%- for message in messages %}" +
        "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n" +
        "{% elif message.role == 'assistant' %}<|im_start|>assistant\n{% if message.content %}{{ message.content }}{% endif %}" +
        "{%- if message.tool_calls %}{%- for call in message.tool_calls %}\n<tool_call>\n" +
        "{\"name\": \"{{ call.function.name }}\", \"arguments\": {{ call.function.arguments | tojson }}}\n</tool_call>" +
        "{%- endfor %}{% endif %}<|im_end|>\n" +
        "{% elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n</tool_response><|im_end|>\n" +
        "{% endif %}{%- endfor %}" +
        "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    llama2: demoChatTemplates.llama2
} as const;
